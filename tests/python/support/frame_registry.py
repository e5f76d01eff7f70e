"""A registry dict in a module of its own, read by code Dynamo inlines into frame_cases._registered (frame case
registry_order): like Hugging Face's _CAN_RECORD_REGISTRY, which every model's forward iterates. Dynamo reads it
through the module (a live object in any process), and guards the key order of the entry it iterates by the entry's
position in the registry."""


class Registry(dict):
    def get(self, key):
        return super().get(key) or {}


REGISTRY = Registry()


def product(x, name):
    flags = REGISTRY.get(name)
    for key in flags:
        x = x * flags[key]
    return x
