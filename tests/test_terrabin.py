"""The .tzb format: exact round trips, reads into one private buffer, and a named error for every corruption."""

from __future__ import annotations

import dataclasses
import struct
import zlib

import numpy as np
import pytest
from conftest import tiny_junction

from terrazero_env.maps import MapData, Ragged, TerrabinError, build, load, save
from terrazero_env.maps.terrabin import VERSION, read_sections


def assert_maps_identical(a: MapData, b: MapData) -> None:
    """Every array equal in value, dtype and shape; every scalar and metadata equal."""

    def walk(x, y, path):
        if isinstance(x, np.ndarray):
            assert isinstance(y, np.ndarray), path
            assert x.dtype == y.dtype and x.shape == y.shape, (path, x.dtype, y.dtype, x.shape, y.shape)
            np.testing.assert_array_equal(x, y, err_msg=path)
        elif isinstance(x, Ragged):
            walk(x.values, y.values, path + ".values")
            walk(x.offsets, y.offsets, path + ".offsets")
        elif dataclasses.is_dataclass(x):
            assert type(x) is type(y), path
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name), getattr(y, f.name), f"{path}.{f.name}")
        else:
            assert x == y, (path, x, y)

    walk(a, b, "map")


@pytest.mark.parametrize("with_tracks", [False, True])
@pytest.mark.parametrize("built", [False, True])
def test_round_trip_is_exact(tmp_path, with_tracks, built):
    m = tiny_junction(tracks=with_tracks)
    if built:
        m = build(m)
    save(m, tmp_path / "m.tzb")
    assert_maps_identical(m, load(tmp_path / "m.tzb"))


def test_round_trip_keeps_missing_intersections_missing(tmp_path):
    m = tiny_junction(with_intersections=False)
    save(m, tmp_path / "m.tzb")
    assert load(tmp_path / "m.tzb").intersections is None


def test_loaded_arrays_are_read_only_views_of_one_private_copy_of_the_file(tmp_path):
    m = build(tiny_junction())
    save(m, tmp_path / "m.tzb")
    loaded = load(tmp_path / "m.tzb")
    arr = loaded.lanes.centerline.values
    assert not arr.flags.owndata and not arr.flags.writeable
    base = arr
    while getattr(base, "base", None) is not None and not isinstance(base, memoryview):
        base = base.base
    assert isinstance(base, memoryview)  # a view of the one copy of the file, no copy per section
    assert arr.ctypes.data % 64 == 0  # sections are 64-byte aligned for SIMD-friendly access


def test_sections_are_aligned_and_checksummed(tmp_path):
    save(build(tiny_junction()), tmp_path / "m.tzb")
    arrays, meta = read_sections(tmp_path / "m.tzb")
    assert meta["name"] == "tiny_junction"
    assert "lanes.centerline.values" in arrays and arrays["lanes.centerline.values"].dtype == np.float64


@pytest.fixture
def tzb(tmp_path):
    p = tmp_path / "m.tzb"
    save(build(tiny_junction()), p)
    return p


def _rewrite_header(data: bytearray, **fields) -> None:
    """Patch header fields and recompute the header checksum (so only the field is wrong)."""
    offs = {"major": (8, "<H"), "minor": (10, "<H"), "bom": (12, "<I")}
    for k, v in fields.items():
        o, fmt = offs[k]
        struct.pack_into(fmt, data, o, v)
    struct.pack_into("<I", data, 60, zlib.crc32(bytes(data[:60])))


def test_empty_file(tmp_path):
    p = tmp_path / "e.tzb"
    p.write_bytes(b"")
    with pytest.raises(TerrabinError, match="truncated: empty file"):
        load(p)


@pytest.mark.parametrize("keep", [10, 64, 200, -1])
def test_truncated_file(tzb, keep):
    data = tzb.read_bytes()
    tzb.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    with pytest.raises(TerrabinError, match="truncated"):
        load(tzb)


def test_wrong_magic(tzb):
    data = bytearray(tzb.read_bytes())
    data[:8] = b"PK\x03\x04zzzz"
    tzb.write_bytes(data)
    with pytest.raises(TerrabinError, match="not a terrabin file"):
        load(tzb)


def test_future_version(tzb):
    data = bytearray(tzb.read_bytes())
    _rewrite_header(data, major=VERSION[0] + 1)
    tzb.write_bytes(data)
    with pytest.raises(TerrabinError, match=r"format version 2\.0 is newer than this reader"):
        load(tzb)


def test_newer_minor_version_is_read(tzb):
    data = bytearray(tzb.read_bytes())
    _rewrite_header(data, minor=VERSION[1] + 7)
    tzb.write_bytes(data)
    assert len(load(tzb).lanes) == 24


def test_big_endian_mark_is_rejected(tzb):
    data = bytearray(tzb.read_bytes())
    _rewrite_header(data, bom=0x04030201)
    tzb.write_bytes(data)
    with pytest.raises(TerrabinError, match="byte order"):
        load(tzb)


def test_corrupt_header(tzb):
    data = bytearray(tzb.read_bytes())
    data[16] ^= 0xFF  # section count, without fixing the header checksum
    tzb.write_bytes(data)
    with pytest.raises(TerrabinError, match="corrupt header"):
        load(tzb)


def test_corrupt_section_data_names_the_section(tzb):
    data = bytearray(tzb.read_bytes())
    # Locate the lane-width section through the section table and flip one bit inside it.
    offset = None
    count = struct.unpack_from("<I", data, 16)[0]
    table = struct.unpack_from("<Q", data, 20)[0]
    for i in range(count):
        name = bytes(data[table + 128 * i : table + 128 * i + 48]).rstrip(b"\0")
        if name == b"lanes.width":
            offset = struct.unpack_from("<Q", data, table + 128 * i + 92)[0]
    data[offset] ^= 0x01
    tzb.write_bytes(data)
    with pytest.raises(TerrabinError, match=r"corrupt section 'lanes.width' \(checksum mismatch\)"):
        load(tzb)
    # The checksum can be skipped knowingly; then the flipped bit shows up in the data.
    assert load(tzb, verify=False).lanes.width[0] != 3.5


def test_corrupt_section_table(tzb):
    data = bytearray(tzb.read_bytes())
    table = struct.unpack_from("<Q", data, 20)[0]
    data[table + 3] ^= 0x20
    tzb.write_bytes(data)
    with pytest.raises(TerrabinError, match="corrupt section table"):
        load(tzb)


def test_not_a_file_at_all(tmp_path):
    p = tmp_path / "m.tzb"
    p.write_bytes(b"lanes: []\n" * 20)
    with pytest.raises(TerrabinError, match="not a terrabin file"):
        load(p)



# --------------------------------------------------------------------------------------------------
# valid checksums over corrupt contents: the contents are validated, not only the bytes


def _patch_section(data: bytearray, name: str, dtype: str, index: int, value) -> None:
    """Overwrite element ``index`` of section ``name`` and re-seal every checksum, as a crafted file would."""
    count = struct.unpack_from("<I", data, 16)[0]
    table = struct.unpack_from("<Q", data, 20)[0]
    for i in range(count):
        e = table + 128 * i
        if bytes(data[e : e + 48]).rstrip(b"\0") == name.encode():
            offset, nbytes = struct.unpack_from("<QQ", data, e + 92)
            arr = np.frombuffer(data, dtype=dtype, count=nbytes // np.dtype(dtype).itemsize, offset=offset).copy()
            arr.reshape(-1)[index] = value
            data[offset : offset + nbytes] = arr.tobytes()
            struct.pack_into("<I", data, e + 108, zlib.crc32(bytes(data[offset : offset + nbytes])))
            break
    else:
        raise KeyError(name)
    struct.pack_into("<I", data, 36, zlib.crc32(bytes(data[table : table + 128 * count])))
    struct.pack_into("<I", data, 60, zlib.crc32(bytes(data[:60])))


@pytest.mark.parametrize(("section", "dtype", "index", "value", "message"), [
    ("lanes.successors.values", "<i4", 0, 10_000, r"lanes.successors\[\d+\]: lane id 10000 is out of range"),
    ("lanes.centerline.values", "<f8", 4, np.nan, r"lanes.centerline\[\d+\]: point \d+ is not finite"),
    ("signals.stop_line", "<i4", 0, 999, r"signals.stop_line: reference 999 at entry 0 is out of range"),
    ("lanes.centerline.offsets", "<i8", 1, 10**12, r"lanes.centerline: offsets"),
    ("lanes.lane_type", "|u1", 0, 200, r"lanes.lane_type\[0\]: 200 is not a valid LaneType"),
])
def test_checksummed_file_with_corrupt_contents_is_refused_naming_the_element(tmp_path, section, dtype, index,
                                                                              value, message):
    from terrazero_env.maps import MapValidationError

    p = save(build(tiny_junction()), tmp_path / "m.tzb")
    data = bytearray(p.read_bytes())
    _patch_section(data, section, dtype, index, value)
    p.write_bytes(data)
    read_sections(p)  # every checksum is valid
    with pytest.raises(MapValidationError, match=message):
        load(p)


@pytest.mark.parametrize(("section", "index", "value", "message"), [
    ("lanes.stop_line", 0, 77, r"lanes.stop_line: reference 77 at entry 0 is out of range"),
    ("lanes.intersection", 0, 55, r"lanes.intersection: reference 55 at entry 0 is out of range"),
    ("stop_lines.control", 0, 9, r"stop_lines.control\[0\]: 9 is not a valid ControlType"),
])
def test_built_fields_out_of_range_are_refused_before_the_engine_sees_them(tmp_path, section, index, value,
                                                                           message):
    """The derived fields the engine indexes with are checked on the way to the engine (``load_built``),
    so a crafted file fails with a named error instead of crashing the process."""
    from terrazero_env.maps import MapValidationError
    from terrazero_env.maps.sources import load_built

    p = save(build(tiny_junction()), tmp_path / "m.tzb")
    data = bytearray(p.read_bytes())
    dtype = {"lanes.stop_line": "<i4", "lanes.intersection": "<i4", "stop_lines.control": "|u1"}[section]
    _patch_section(data, section, dtype, index, value)
    p.write_bytes(data)
    with pytest.raises(MapValidationError, match=message):
        load_built(p)
    import terrazero_env

    with pytest.raises(MapValidationError, match=message):
        terrazero_env.make_vec(num_worlds=1, preset="quick", maps=[str(p)])


def test_a_map_wider_than_the_extent_limit_is_refused():
    """The road index grows with the square of the bounding box: a far-away stray edge must not make a
    small map cost gigabytes."""
    from conftest import straight_road

    from terrazero_env.maps import MAX_MAP_EXTENT, MapValidationError, Polylines

    m = straight_road()
    far = MAX_MAP_EXTENT + 1000.0
    edges = m.road_edges.rows() + [np.array([[far, 0.0, 0.0], [far + 10.0, 0.0, 0.0]])]
    with pytest.raises(MapValidationError, match=r"map extent: the bounding box is \d+ m x \d+ m, over the"):
        build(m.replace(road_edges=Polylines(edges)))
    build(m)  # the same map without the stray edge is fine
