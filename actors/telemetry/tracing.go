package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ServiceName is the service.name of kvrouter's spans unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const ServiceName = "kvrouter"

// StartTracing installs the global TracerProvider the environment asks for
// and returns the function that flushes and stops it (call it on exit).
//
//   - OTEL_TRACES_EXPORTER: otlp, console or none (autoexport). Unset means
//     none — kvrouter traces nothing and the instrumented paths cost a
//     pointer compare — unless an OTLP endpoint is set, which means otlp.
//   - OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//     OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (http/protobuf by default, or
//     grpc), headers etc.: read by the OTLP exporters.
//   - OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG: read by the SDK
//     (default parentbased_always_on; e.g. parentbased_traceidratio with
//     0.01 keeps 1 % of engine batches and route requests, whole). The SDK
//     reports an invalid value through otel's error handler (stderr) and
//     keeps the default.
//   - OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: the resource.
//   - OTEL_SDK_DISABLED=true: nothing is installed.
//
// It also installs the W3C trace-context and baggage propagators, so an
// incoming traceparent header continues the caller's trace.
func StartTracing(ctx context.Context) (shutdown func(context.Context) error, err error) {
	nothing := func(context.Context) error { return nil }
	if !tracingWanted() {
		return nothing, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("trace exporter: %w", err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nothing, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// tracingWanted reports whether the environment asks for an exporter.
func tracingWanted() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true
}
