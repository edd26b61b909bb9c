"""The daemon's tornado REST API: ``app.make_app`` and its route modules; ``openapi.yaml`` describes it."""
