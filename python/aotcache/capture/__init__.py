"""Capture: what a compile is, as content. Dynamo's GraphModule and example inputs become the C++ core's IR
(graph.py); user Python code is digested by content (code_digest.py); size symbols and float inputs get canonical
names (symbolic.py); DTensor graphs are described by mesh layout and placements (distributed_tensor.py); custom ops
and checkpoint policies are pinned (op_pins.py).
"""
