"""price.predict's Prometheus metrics (prometheus_client), named like gostd's own.

gostd counts its gRPC calls as gost_grpc_requests_total{method,code} and
gost_grpc_request_seconds{method}; this process uses the same names and labels under its own
prefix, gost_price_predict_, so that one dashboard reads both. Served on /metrics by
server.py's --metrics-listen (off unless given). README.md lists the families.
"""

from __future__ import annotations

import time
from typing import Callable

import grpc
import prometheus_client as prom

PREFIX = "gost_price_predict_"
SERVICE = "/gost.v1.StageService/"
METHODS = ("ShouldProcess", "Process", "AfterSave")

# A prediction is a few dictionary look-ups: most calls take well under a millisecond.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                   0.5, 1.0, 2.5)
CONFIDENCE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

# gostd shows no `_created` series; neither does this process.
prom.disable_created_metrics()

REQUESTS = prom.Counter(
    PREFIX + "requests_total",
    "StageService calls answered, by full method name and gRPC status code (OK; "
    "INVALID_ARGUMENT for a request without an offer or with a state of another type; "
    "UNIMPLEMENTED for AfterSave, which this stage does not declare).",
    ["method", "code"])
REQUEST_SECONDS = prom.Histogram(
    PREFIX + "request_seconds", "Time to answer a StageService call, by full method name.",
    ["method"], buckets=LATENCY_BUCKETS)
DECISIONS = prom.Counter(
    PREFIX + "decisions_total",
    "ShouldProcess answers: process (the inputs or the model changed), skip (the stored "
    "prediction is current).", ["decision"])
PREDICTIONS = prom.Counter(
    PREFIX + "predictions_total",
    "Prices predicted (Process calls that returned a new state), by the model's basis "
    "(category+region, category, global).", ["basis"])
CONFIDENCE = prom.Histogram(
    PREFIX + "prediction_confidence", "The confidence (0-1) of the predictions made, by basis.",
    ["basis"], buckets=CONFIDENCE_BUCKETS)
MODEL_INFO = prom.Gauge(
    PREFIX + "model_info", "The loaded model: its file, version (a digest of its content) and "
    "currency; always 1.", ["path", "version", "currency"])
MODEL_SAMPLES = prom.Gauge(PREFIX + "model_samples",
                           "Priced offers the loaded model was trained on.")
MODEL_CATEGORIES = prom.Gauge(PREFIX + "model_categories",
                              "Categories in the loaded model's table.")
MODEL_LOADED = prom.Gauge(PREFIX + "model_loaded_timestamp_seconds",
                          "When the loaded model was read from its file (Unix time).")

for _m in METHODS:  # every method shows from the start, with its OK count (as gostd's)
    REQUESTS.labels(SERVICE + _m, "OK")
    REQUEST_SECONDS.labels(SERVICE + _m)
for _d in ("process", "skip"):
    DECISIONS.labels(_d)


def model_loaded(path: str, version: str, currency: str, samples: int, categories: int) -> None:
    MODEL_INFO.labels(path, version, currency).set(1)
    MODEL_SAMPLES.set(samples)
    MODEL_CATEGORIES.set(categories)
    MODEL_LOADED.set(time.time())


def decided(decision: str) -> None:
    DECISIONS.labels(decision).inc()


def predicted(basis: str, confidence: float) -> None:
    PREDICTIONS.labels(basis).inc()
    CONFIDENCE.labels(basis).observe(confidence)


def _code_name(context: grpc.ServicerContext, failed: bool) -> str:
    code = context.code()  # set by context.abort / set_code; None: not set
    if isinstance(code, grpc.StatusCode):
        return code.name
    return "UNKNOWN" if failed else "OK"


class Interceptor(grpc.ServerInterceptor):
    """Counts and times every unary call of the service by method and status code (a method
    the servicer leaves to its generated base, AfterSave here, answers UNIMPLEMENTED). Calls
    of methods the server does not know are left alone: their names come from the caller."""

    def intercept_service(self, continuation: Callable, details: grpc.HandlerCallDetails):
        method = details.method
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary

        def timed(request, context: grpc.ServicerContext):
            start = time.perf_counter()
            failed = True
            try:
                resp = inner(request, context)
                failed = False
                return resp
            finally:
                REQUEST_SECONDS.labels(method).observe(time.perf_counter() - start)
                REQUESTS.labels(method, _code_name(context, failed)).inc()

        return grpc.unary_unary_rpc_method_handler(
            timed, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def serve(listen: str) -> int:
    """Serves /metrics on `listen` (host:port; port 0 picks one) in a thread; the bound port."""
    host, _, port = listen.rpartition(":")
    server, _ = prom.start_http_server(int(port), addr=host or "0.0.0.0")
    return server.server_port
