"""Serving: TF Serving configs, gRPC and REST clients, and a local server."""
