"""price.predict: an external gost stage (gost.v1.StageService) in Python.

It predicts an offer's price from its category, region and attributes with the table of
model.py and keeps the prediction as its state (price.v1.Prediction). The run is idempotent:
the state records a digest of the inputs and the model version it was made from, and
ShouldProcess answers SKIP while both are unchanged.

    VENV/bin/python server.py --model model.json --listen 127.0.0.1:7000 [--port-file FILE]
        [--metrics-listen 127.0.0.1:9464 [--metrics-port-file FILE]]

Run it with the venv of setup.sh (grpcio and the generated stubs). README.md has the contract.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from concurrent import futures

import grpc
from gost.v1 import offer_pb2, stage_service_pb2, stage_service_pb2_grpc
from price.v1 import prediction_pb2

import metrics
from model import Features, Model

log = logging.getLogger("price.predict")
STATE_TYPE = prediction_pb2.Prediction.DESCRIPTOR.full_name


def features_of(offer: offer_pb2.Offer) -> Features:
    return Features(offer.category, offer.address.region, dict(offer.attributes))


class PricePredict(stage_service_pb2_grpc.StageServiceServicer):
    def __init__(self, model: Model) -> None:
        self.model = model

    def _state(self, request: stage_service_pb2.StageRequest,
               context: grpc.ServicerContext) -> prediction_pb2.Prediction | None:
        """The stored prediction, None when there is none; aborts on a state of another type."""
        if not request.HasField("offer"):
            log.warning("refused code=INVALID_ARGUMENT stage=%s reason=no_offer",
                        request.stage_id)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "StageRequest.offer is unset")
        if not request.HasField("state"):
            return None
        state = prediction_pb2.Prediction()
        if not request.state.Unpack(state):
            log.warning("refused code=INVALID_ARGUMENT stage=%s offer=%s version=%d reason=%s "
                        "type_url=%s", request.stage_id, request.offer.id, request.offer.version,
                        "state_type", request.state.type_url)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"stage {request.stage_id!r} has a state of type "
                          f"{request.state.type_url}, expected {STATE_TYPE}: is the stage id "
                          "in stages.external the one this service was declared under?")
        return state

    def _current(self, state: prediction_pb2.Prediction | None, f: Features) -> bool:
        return state is not None and state.inputs == f.digest() and state.model == self.model.version

    def ShouldProcess(self, request: stage_service_pb2.StageRequest,
                      context: grpc.ServicerContext) -> stage_service_pb2.ShouldProcessResponse:
        state = self._state(request, context)
        current = self._current(state, features_of(request.offer))
        metrics.decided("skip" if current else "process")
        log.debug("decided offer=%s version=%d decision=%s", request.offer.id,
                  request.offer.version, "skip" if current else "process")
        return stage_service_pb2.ShouldProcessResponse(
            decision=stage_service_pb2.ShouldProcessResponse.SKIP
            if current else stage_service_pb2.ShouldProcessResponse.PROCESS)

    def Process(self, request: stage_service_pb2.StageRequest,
                context: grpc.ServicerContext) -> stage_service_pb2.ProcessResponse:
        state = self._state(request, context)
        f = features_of(request.offer)
        resp = stage_service_pb2.ProcessResponse()
        if self._current(state, f):
            return resp  # asked again for the same input: nothing changes
        p = self.model.predict(f)
        metrics.predicted(p.basis, p.confidence)
        resp.state.Pack(prediction_pb2.Prediction(
            price=offer_pb2.Money(amount_minor=p.price_minor, currency=p.currency),
            confidence=p.confidence, basis=p.basis, samples=p.samples, inputs=f.digest(),
            model=self.model.version))
        log.info("predicted offer=%s version=%d price_minor=%d currency=%s confidence=%.3f "
                 "basis=%s", request.offer.id, request.offer.version, p.price_minor,
                 p.currency, p.confidence, p.basis)
        return resp

    def AfterSave(self, request: stage_service_pb2.AfterSaveRequest,
                  context: grpc.ServicerContext) -> stage_service_pb2.AfterSaveResponse:
        # No side effects: the stage is declared without after_save=1, so gost never calls it.
        log.warning("refused code=UNIMPLEMENTED stage=%s offer=%s reason=no_after_save",
                    request.stage_id, request.event.offer.id)
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      "price.predict has no side effects: declare it in stages.external "
                      "without after_save=1")


def write_port(path: str, port: int) -> None:
    """Writes `port` to `path` whole (rename), so a reader never sees half a number."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the model file written by train.py")
    ap.add_argument("--listen", default="127.0.0.1:7000", help="host:port; port 0 picks one")
    ap.add_argument("--port-file", help="write the bound port here once serving")
    ap.add_argument("--workers", type=int, default=8, help="threads answering calls")
    ap.add_argument("--max-calls", type=int, default=64,
                    help="calls at once; past it gost gets RESOURCE_EXHAUSTED and backs off")
    ap.add_argument("--metrics-listen", default=os.environ.get("PRICE_PREDICT_METRICS_LISTEN"),
                    help="host:port serving Prometheus /metrics (port 0 picks one); default "
                    "$PRICE_PREDICT_METRICS_LISTEN, unset: no metrics endpoint")
    ap.add_argument("--metrics-port-file", help="write the metrics port here once serving")
    ap.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"],
                    help="DEBUG adds a line per ShouldProcess answer")
    args = ap.parse_args()
    if args.metrics_port_file and not args.metrics_listen:
        ap.error("--metrics-port-file needs --metrics-listen")
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s level=%(levelname)s logger=%(name)s %(message)s")

    try:
        model = Model.load(args.model)
    except (OSError, ValueError, KeyError) as e:
        log.error("cannot load model path=%s error=%r: run train.py to make one", args.model, e)
        return 2
    metrics.model_loaded(args.model, model.version, model.currency, model.samples,
                         model.categories)
    log.info("model loaded path=%s version=%s samples=%d categories=%d", args.model,
             model.version, model.samples, model.categories)

    if args.metrics_listen:
        try:
            metrics_port = metrics.serve(args.metrics_listen)
        except (OSError, ValueError) as e:
            log.error("cannot serve metrics address=%s error=%r: --metrics-listen is host:port",
                      args.metrics_listen, e)
            return 2
        if args.metrics_port_file:
            write_port(args.metrics_port_file, metrics_port)
        log.info("metrics port=%d path=/metrics", metrics_port)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers),
                         interceptors=[metrics.Interceptor()],
                         maximum_concurrent_rpcs=args.max_calls)
    stage_service_pb2_grpc.add_StageServiceServicer_to_server(PricePredict(model), server)
    port = server.add_insecure_port(args.listen)
    if port == 0:
        log.error("cannot listen address=%s", args.listen)
        return 2
    server.start()
    if args.port_file:
        write_port(args.port_file, port)
    log.info("serving port=%d model=%s currency=%s", port, model.version, model.currency)

    def stop(*_: object) -> None:
        server.stop(grace=5)  # finishes the calls in flight; wait_for_termination then returns

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.wait_for_termination()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
