"""The GUI process's side of the wire (no Qt): the client connection."""
