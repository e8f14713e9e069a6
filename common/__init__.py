"""What every layer shares: the user-error type and atomic file writes.
Imports no other package of the service.
"""
