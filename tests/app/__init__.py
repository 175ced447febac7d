"""Tests of the application layer (captum_iba.app)."""
