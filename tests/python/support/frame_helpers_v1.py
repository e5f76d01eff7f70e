"""A helper Dynamo inlines into frame_cases._uses_helper; test_frames.py installs it as frame_helpers.py and swaps
in frame_helpers_v2.py (a different body, same name and lines) between processes."""


def helper(x):
    return x * 2
