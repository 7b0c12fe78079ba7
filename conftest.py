"""Root conftest for the project's own tests (the plugin itself is loaded via its entry point)."""

pytest_plugins = ["pytester"]
