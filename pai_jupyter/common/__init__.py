"""What protocol, client, cluster, server and notebook share and none of them owns: the job and task states,
the home directory and its paths, the route of a task's service. It imports none of those packages."""
