"""The HTTP edge: parse, validate, call the core, render. The app is `cari.api.app.create_app`;
this package's modules are imported one by one (the client imports their structs), so nothing
here imports the app."""
