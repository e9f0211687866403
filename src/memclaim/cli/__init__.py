"""The ``memclaim`` command: parse, call the library, print. Console output lives here."""
