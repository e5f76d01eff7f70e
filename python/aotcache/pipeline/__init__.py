"""One compile as one request flowing through explicit phases (backend.py runs them behind one failure boundary):

    capture -> check -> key          keying.py     the graph, its inputs and state, as a key (or a Bypass)
    lookup -> load                   lookup.py     static and guarded entries: Hit or None
    compile                          compiling.py  AOTAutograd + Inductor, serializable (on a miss)
    persist                          persist.py    the entry, the guard index, the remote tier
    count and log                    outcome.py    hit / miss / bypass / internal_error, written once

A phase records its name in `request.phase` as it starts, so an unexpected exception is counted under the phase it
hit (`internal_error.<phase>`).
"""
