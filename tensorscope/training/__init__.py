"""The training process's side: the session, its sinks, the sender, the runner."""
