"""The cluster's state and bookkeeping: store, submit/schedule/complete/stop (``service.Cluster``), queue, capacity,
recovery, accounts, space, max run time, and the error codes the API answers with."""
