"""An importable Enum with a str mixin, as PEFT's PeftType (test_process_state.py, frame_cases.enum_attribute)."""

import enum


class Kind(str, enum.Enum):
    LORA = "LORA"
    IA3 = "IA3"
