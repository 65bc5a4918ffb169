"""Who may talk to the master, and over what: workers' authentication (``auth``: their
ServiceAccount tokens, TokenReviews, the pods behind them), readers' authorization
(``readauth``: SubjectAccessReviews), the serving certificate (``tls``, made with
``certs``) and its renewal."""
