"""Why a graph does not use the cache: raised inside aotcache, turned into a counted bypass, never seen by users."""


class Bypass(Exception):
    """The graph is compiled normally and not cached. `code` is a stable snake_case reason counted in stats."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
