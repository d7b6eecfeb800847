"""Evaluation: the closed-loop score and its statistics (:mod:`.metrics`, torch-free), the long-tail
scenario families (:mod:`.suites`), the evaluation charts (:mod:`.plots`) and the realism of simulated
agents against logs (:mod:`.realism`, ``python -m terrazero_env.evaluation.realism``). This ``__init__``
imports none of them: each sits in its own layer of docs/design.md's table.
"""
