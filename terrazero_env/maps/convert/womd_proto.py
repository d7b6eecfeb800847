"""The Waymo Open Motion Dataset ``Scenario`` message, declared for :mod:`google.protobuf` at import.

Written from the field list of Waymo's published schema (``waymo_open_dataset/protos/scenario.proto``
and ``map.proto``, proto2, package ``waymo.open_dataset``): every message, field number, type and enum
value here matches those files, so ``Scenario.FromString`` reads the records of a WOMD TFRecord and
``SerializeToString`` writes records the official reader accepts. The lidar and camera-token fields
(12, 13) are left out; the parser keeps them as unknown fields and this package does not read them.

The descriptor is built in code (a ``FileDescriptorProto``) rather than shipped as ``protoc`` output:
generated ``_pb2`` modules are tied to the protobuf release that generated them, while a descriptor
built at run time works with every protobuf runtime from 3.20 on (the range the dependency allows).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["Scenario", "MapFeature", "Track", "ObjectState", "DynamicMapState", "TrafficSignalLaneState",
           "MapPoint", "LaneCenter", "RoadLine", "RoadEdge", "LaneNeighbor", "RequiredPrediction"]

_PKG = "waymo.open_dataset"
_F = descriptor_pb2.FieldDescriptorProto
_T = {"double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64, "int32": _F.TYPE_INT32,
      "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING}
_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# (message name, fields, nested enums, oneof name or None). A field is (name, number, label, type) with
# type a scalar name, "msg:Name" or "enum:Name" (names relative to the package).
_MESSAGES: list[tuple[str, list[tuple[str, int, int, str]], dict[str, list[str]], str | None]] = [
    ("MapPoint", [("x", 1, _OPT, "double"), ("y", 2, _OPT, "double"), ("z", 3, _OPT, "double")], {}, None),
    ("TrafficSignalLaneState", [("lane", 1, _OPT, "int64"), ("state", 2, _OPT, "enum:TrafficSignalLaneState.State"),
                                ("stop_point", 3, _OPT, "msg:MapPoint")],
     {"State": ["LANE_STATE_UNKNOWN", "LANE_STATE_ARROW_STOP", "LANE_STATE_ARROW_CAUTION", "LANE_STATE_ARROW_GO",
                "LANE_STATE_STOP", "LANE_STATE_CAUTION", "LANE_STATE_GO", "LANE_STATE_FLASHING_STOP",
                "LANE_STATE_FLASHING_CAUTION"]}, None),
    ("BoundarySegment", [("lane_start_index", 1, _OPT, "int32"), ("lane_end_index", 2, _OPT, "int32"),
                         ("boundary_feature_id", 3, _OPT, "int64"),
                         ("boundary_type", 4, _OPT, "enum:RoadLine.RoadLineType")], {}, None),
    ("LaneNeighbor", [("feature_id", 1, _OPT, "int64"), ("self_start_index", 2, _OPT, "int32"),
                      ("self_end_index", 3, _OPT, "int32"), ("neighbor_start_index", 4, _OPT, "int32"),
                      ("neighbor_end_index", 5, _OPT, "int32"), ("boundaries", 6, _REP, "msg:BoundarySegment")],
     {}, None),
    ("LaneCenter", [("speed_limit_mph", 1, _OPT, "double"), ("type", 2, _OPT, "enum:LaneCenter.LaneType"),
                    ("interpolating", 3, _OPT, "bool"), ("polyline", 8, _REP, "msg:MapPoint"),
                    ("entry_lanes", 9, _REP, "int64"), ("exit_lanes", 10, _REP, "int64"),
                    ("left_neighbors", 11, _REP, "msg:LaneNeighbor"), ("right_neighbors", 12, _REP, "msg:LaneNeighbor"),
                    ("left_boundaries", 13, _REP, "msg:BoundarySegment"),
                    ("right_boundaries", 14, _REP, "msg:BoundarySegment")],
     {"LaneType": ["TYPE_UNDEFINED", "TYPE_FREEWAY", "TYPE_SURFACE_STREET", "TYPE_BIKE_LANE"]}, None),
    ("RoadEdge", [("type", 1, _OPT, "enum:RoadEdge.RoadEdgeType"), ("polyline", 2, _REP, "msg:MapPoint")],
     {"RoadEdgeType": ["TYPE_UNKNOWN", "TYPE_ROAD_EDGE_BOUNDARY", "TYPE_ROAD_EDGE_MEDIAN"]}, None),
    ("RoadLine", [("type", 1, _OPT, "enum:RoadLine.RoadLineType"), ("polyline", 2, _REP, "msg:MapPoint")],
     {"RoadLineType": ["TYPE_UNKNOWN", "TYPE_BROKEN_SINGLE_WHITE", "TYPE_SOLID_SINGLE_WHITE",
                       "TYPE_SOLID_DOUBLE_WHITE", "TYPE_BROKEN_SINGLE_YELLOW", "TYPE_BROKEN_DOUBLE_YELLOW",
                       "TYPE_SOLID_SINGLE_YELLOW", "TYPE_SOLID_DOUBLE_YELLOW", "TYPE_PASSING_DOUBLE_YELLOW"]}, None),
    ("StopSign", [("lane", 1, _REP, "int64"), ("position", 2, _OPT, "msg:MapPoint")], {}, None),
    ("Crosswalk", [("polygon", 1, _REP, "msg:MapPoint")], {}, None),
    ("SpeedBump", [("polygon", 1, _REP, "msg:MapPoint")], {}, None),
    ("Driveway", [("polygon", 1, _REP, "msg:MapPoint")], {}, None),
    ("MapFeature", [("id", 1, _OPT, "int64"), ("lane", 3, _OPT, "msg:LaneCenter"), ("road_line", 4, _OPT, "msg:RoadLine"),
                    ("road_edge", 5, _OPT, "msg:RoadEdge"), ("stop_sign", 7, _OPT, "msg:StopSign"),
                    ("crosswalk", 8, _OPT, "msg:Crosswalk"), ("speed_bump", 9, _OPT, "msg:SpeedBump"),
                    ("driveway", 10, _OPT, "msg:Driveway")], {}, "feature_data"),
    ("ObjectState", [("center_x", 2, _OPT, "double"), ("center_y", 3, _OPT, "double"), ("center_z", 4, _OPT, "double"),
                     ("length", 5, _OPT, "float"), ("width", 6, _OPT, "float"), ("height", 7, _OPT, "float"),
                     ("heading", 8, _OPT, "float"), ("velocity_x", 9, _OPT, "float"),
                     ("velocity_y", 10, _OPT, "float"), ("valid", 11, _OPT, "bool")], {}, None),
    ("Track", [("id", 1, _OPT, "int32"), ("object_type", 2, _OPT, "enum:Track.ObjectType"),
               ("states", 3, _REP, "msg:ObjectState")],
     {"ObjectType": ["TYPE_UNSET", "TYPE_VEHICLE", "TYPE_PEDESTRIAN", "TYPE_CYCLIST", "TYPE_OTHER"]}, None),
    ("DynamicMapState", [("lane_states", 1, _REP, "msg:TrafficSignalLaneState")], {}, None),
    ("RequiredPrediction", [("track_index", 1, _OPT, "int32"),
                            ("difficulty", 2, _OPT, "enum:RequiredPrediction.DifficultyLevel")],
     {"DifficultyLevel": ["NONE", "LEVEL_1", "LEVEL_2"]}, None),
    ("Scenario", [("timestamps_seconds", 1, _REP, "double"), ("tracks", 2, _REP, "msg:Track"),
                  ("objects_of_interest", 4, _REP, "int32"), ("scenario_id", 5, _OPT, "string"),
                  ("sdc_track_index", 6, _OPT, "int32"), ("dynamic_map_states", 7, _REP, "msg:DynamicMapState"),
                  ("map_features", 8, _REP, "msg:MapFeature"), ("current_time_index", 10, _OPT, "int32"),
                  ("tracks_to_predict", 11, _REP, "msg:RequiredPrediction")], {}, None),
]
# Waymo marks these repeated scalars [packed = true] in map.proto (proto2 defaults to unpacked).
_PACKED = {("LaneCenter", "entry_lanes"), ("LaneCenter", "exit_lanes")}
_ONEOF_MEMBERS = {"lane", "road_line", "road_edge", "stop_sign", "crosswalk", "speed_bump", "driveway"}


def _file() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="terrazero_env/womd_scenario.proto", package=_PKG, syntax="proto2")
    for name, fields, enums, oneof in _MESSAGES:
        m = f.message_type.add(name=name)
        for ename, values in enums.items():
            e = m.enum_type.add(name=ename)
            for i, v in enumerate(values):
                e.value.add(name=v, number=i)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for fname, number, label, ftype in fields:
            fd = m.field.add(name=fname, number=number, label=label)
            if ftype.startswith("msg:"):
                fd.type, fd.type_name = _F.TYPE_MESSAGE, f".{_PKG}.{ftype[4:]}"
            elif ftype.startswith("enum:"):
                fd.type, fd.type_name = _F.TYPE_ENUM, f".{_PKG}.{ftype[5:]}"
            else:
                fd.type = _T[ftype]
            if (name, fname) in _PACKED:
                fd.options.packed = True
            if oneof and fname in _ONEOF_MEMBERS:
                fd.oneof_index = 0
    return f


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _cls(name: str) -> type:
    desc = _POOL.FindMessageTypeByName(f"{_PKG}.{name}")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.21
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(_POOL).GetPrototype(desc)


Scenario = _cls("Scenario")
MapFeature = _cls("MapFeature")
Track = _cls("Track")
ObjectState = _cls("ObjectState")
DynamicMapState = _cls("DynamicMapState")
TrafficSignalLaneState = _cls("TrafficSignalLaneState")
MapPoint = _cls("MapPoint")
LaneCenter = _cls("LaneCenter")
RoadLine = _cls("RoadLine")
RoadEdge = _cls("RoadEdge")
LaneNeighbor = _cls("LaneNeighbor")
RequiredPrediction = _cls("RequiredPrediction")
