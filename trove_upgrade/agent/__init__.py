"""The guest-side upgrade agent, and the control plane's client of it."""
