package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/otelexport"
)

// otlpOptions are the OpenTelemetry flags of `modelcalls proxy` (docs/otel.md).
type otlpOptions struct {
	endpoint string
	protocol string
	content  bool
}

// otlpFlushTimeout bounds the export of what is left when the proxy stops.
const otlpFlushTimeout = 10 * time.Second

func addOTLPFlags(f *pflag.FlagSet, o *otlpOptions) {
	f.StringVar(&o.endpoint, "otlp-endpoint", "", "export every captured call as an OpenTelemetry span to this OTLP base URL (e.g. http://127.0.0.1:4318; default: OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, none when unset)")
	f.StringVar(&o.protocol, "otlp-protocol", "", "OTLP protocol: http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)")
	// --protocol is export otlp's spelling of --otlp-protocol: accept both (docs/otel.md).
	f.StringVar(&o.protocol, "protocol", "", "the same as --otlp-protocol (export otlp's spelling)")
	f.MarkHidden("protocol")
	f.BoolVar(&o.content, "otlp-content", false, "also export message content (gen_ai.input.messages, gen_ai.output.messages, gen_ai.system_instructions)")
}

// startOTLP turns on live export for h when an endpoint is given by flag or environment, and
// returns the function that flushes it; call that after h.Shutdown, so the spans of the calls the
// drain finished are exported too. Without an endpoint it returns a no-op.
func startOTLP(o *otlpOptions, h *gateway.Handler, upstream *url.URL, log *slog.Logger) (stop func(), err error) {
	sig, err := otelexport.EnvSignals()
	if err != nil {
		return nil, usageErrorf("%w", err)
	}
	if !sig.Traces && !sig.Metrics && (o.endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		// An endpoint is given, but the standard variables turn the SDK off: they win, as in
		// every OpenTelemetry SDK, and the log says so.
		log.Info("OTLP export is off: OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER are none")
		return func() {}, nil
	}
	if !otelexport.Enabled(o.endpoint) {
		if o.protocol != "" || o.content {
			return nil, usageErrorf("--otlp-protocol and --otlp-content need --otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT)")
		}
		return func() {}, nil
	}
	exp, err := otelexport.New(context.Background(), otelexport.Config{
		Endpoint:   o.endpoint,
		Protocol:   o.protocol,
		Content:    o.content,
		Upstream:   upstream,
		Registerer: h.Registry(),
		Logger:     log,
	})
	if err != nil {
		return nil, usageErrorf("--otlp-endpoint: %w", err)
	}
	otel.SetErrorHandler(exp)
	h.OnCaptured = func(c gateway.CapturedCall) { exp.Enqueue(c.RolloutID, c.Exchange, c.Traceparent) }
	log.Info("exporting captured calls over OTLP", "endpoint", otlpEndpointShown(o.endpoint), "content", o.content,
		"traces", sig.Traces, "metrics", sig.Metrics)
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), otlpFlushTimeout)
			defer cancel()
			if err := exp.Shutdown(ctx); err != nil {
				log.Warn("otlp export: flush at exit failed", "err", err)
			}
			c := exp.Counts()
			log.Info("otlp export stopped", "exported", c.Exported, "failed", c.Failed, "dropped", c.Dropped, "invalid", c.Invalid)
		})
	}, nil
}

func otlpEndpointShown(flag string) string {
	if flag == "" {
		return "(from OTEL_EXPORTER_OTLP_* environment)"
	}
	if u, err := url.Parse(flag); err == nil {
		return u.Redacted()
	}
	return fmt.Sprintf("%q", flag)
}
