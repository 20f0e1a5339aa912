"""The application API: what the window, the command line and the server ask the engine for."""
