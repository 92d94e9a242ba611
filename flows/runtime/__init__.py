"""What a flow run needs from its process: Prefect settings and an owned server, signals and
cancellation, progress events, and a heap that gives memory back."""
