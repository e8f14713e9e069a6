"""What runs inside a task (devices and distribution, Vertex AI's folders), and the loopback
cluster with the replica flags it shares with deploy.
Imports no other trainer package.
"""
