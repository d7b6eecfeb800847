"""The bottom of the package: field checks with one-line errors (:mod:`.checks`), bounded reads and
atomic writes of user files (:mod:`.safe_files`) and the YAML loader without code execution
(:mod:`.safe_yaml`), used by ``maps`` and ``config`` alike and importing nothing above them.
"""
