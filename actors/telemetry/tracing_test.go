package telemetry

import (
	"context"
	"testing"

	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// memory is the exporter OTEL_TRACES_EXPORTER=kvrouter-test selects.
var memory = tracetest.NewInMemoryExporter()

// keep is memory without the reset its Shutdown does, so spans can be read
// after the provider's shutdown flushed them.
type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }

func init() {
	autoexport.RegisterSpanExporter("kvrouter-test", func(context.Context) (sdktrace.SpanExporter, error) {
		return keep{memory}, nil
	})
}

var tracer = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/telemetry_test")

// startTracing runs StartTracing with env set (every other OTEL_ variable
// StartTracing reads cleared) and undoes it when the test ends.
func startTracing(t *testing.T, env map[string]string) (func(context.Context) error, error) {
	t.Helper()
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, env[k])
	}
	memory.Reset()
	prev := otel.GetTracerProvider()
	t.Cleanup(func() {
		if otel.GetTracerProvider() != prev {
			otel.SetTracerProvider(prev)
		}
	})
	return StartTracing(context.Background())
}

// rootSampled starts and ends one root span, reporting whether it was sampled.
func rootSampled() bool {
	sp := tracer.Root("probe")
	defer sp.End()
	return sp.Context().Sampled()
}

func TestNoExporterInstallsNothing(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_TRACES_EXPORTER": "kvrouter-test", "OTEL_SDK_DISABLED": "true"},
	} {
		prev := otel.GetTracerProvider()
		shutdown, err := startTracing(t, env)
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		if otel.GetTracerProvider() != prev || rootSampled() {
			t.Errorf("%v: a tracer provider was installed", env)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Errorf("%v: shutdown: %v", env, err)
		}
	}
}

func TestExporterFromEnvironment(t *testing.T) {
	shutdown, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "kvrouter-test"})
	if err != nil {
		t.Fatal(err)
	}
	if !rootSampled() {
		t.Fatal("default sampler dropped a root span")
	}
	if err := shutdown(context.Background()); err != nil { // flushes the batcher
		t.Fatal(err)
	}
	spans := memory.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	if name, _ := spans[0].Resource.Set().Value("service.name"); name.AsString() != ServiceName {
		t.Errorf("service.name %q, want %q", name.Emit(), ServiceName)
	}
}

func TestServiceNameAndSamplerFromEnvironment(t *testing.T) {
	shutdown, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "kvrouter-test",
		"OTEL_SERVICE_NAME": "router-a", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"})
	if err != nil {
		t.Fatal(err)
	}
	sampled := 0
	for range 2000 {
		if rootSampled() {
			sampled++
		}
	}
	if sampled < 350 || sampled > 650 { // 500 expected; random trace ids
		t.Errorf("%d of 2000 roots sampled at ratio 0.25", sampled)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := memory.GetSpans()
	if len(spans) != sampled {
		t.Fatalf("%d spans exported, want the %d sampled", len(spans), sampled)
	}
	want := attribute.String("service.name", "router-a")
	if name, _ := spans[0].Resource.Set().Value(want.Key); name != want.Value {
		t.Errorf("service.name %q, want router-a", name.Emit())
	}
}

func TestUnknownExporterIsAnError(t *testing.T) {
	prev := otel.GetTracerProvider()
	if _, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin-v0"}); err == nil {
		t.Fatal("an unknown exporter name must be an error")
	}
	if otel.GetTracerProvider() != prev {
		t.Error("a failed start installed a provider")
	}
}

func TestOTLPEndpointAloneSelectsOTLP(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if tracingWanted() {
		t.Fatal("tracing wanted with no exporter configured")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	if !tracingWanted() {
		t.Fatal("an OTLP endpoint alone must select the otlp exporter")
	}
}
