"""`delink serve`: the attack and the protection as an HTTP service, and a page for reviewers (docs/serve.md).

``app`` (the endpoints), ``gate`` (admission before routing), ``answer`` (an admitted
request's body, job and answer), ``middleware`` (the layers around them), ``openapi`` (the
API's document and docs page), ``service`` (the pool, rewriters and LLM batches behind them),
``schema`` (what a request may hold), ``limits`` (refusals, admission), ``auth`` (the API
key), ``metrics`` (Prometheus), ``warmup`` (kernels compiled before the port opens),
``settings``; ``client`` calls a server from Python with nothing but httpx, so it needs
none of the serve extra.
"""
