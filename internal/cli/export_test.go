package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// otlpReceiver is a loopback OTLP/HTTP endpoint answering status to every request, counting the
// trace requests it got.
func otlpReceiver(t *testing.T, status int) (*httptest.Server, *atomic.Int64) {
	var traces atomic.Int64
	srv := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" {
			traces.Add(1)
		}
		w.WriteHeader(status)
	})
	return srv, &traces
}

func TestExportOTLP(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	dir := t.TempDir()
	st, _ := capture.Open(dir)
	for _, id := range []string{"r1", "r2"} {
		for range 2 {
			if err := st.AppendExchange(id, exchange("m", `{"prompt_tokens":3,"completion_tokens":1}`, 5, nil, 200, nil)); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("accepted", func(t *testing.T) {
		srv, traces := otlpReceiver(t, http.StatusOK)
		out, errOut, code := runCLI(t, "", "export", "otlp", "--capture-dir", dir, "--endpoint", srv.URL)
		if code != ExitOK || !strings.Contains(out, "exported 4 spans (4 calls, 0 rollout spans) of 2 rollouts; 0 failed") {
			t.Errorf("exit %d, out %q, err %q", code, out, errOut)
		}
		if traces.Load() == 0 {
			t.Error("no trace request reached the endpoint")
		}
	})
	t.Run("--in adds root spans", func(t *testing.T) {
		srv, _ := otlpReceiver(t, http.StatusOK)
		out, errOut, code := runCLI(t, `{"_ng_rollout_id":"r2","reward":1}`+"\n", "export", "otlp", "--capture-dir", dir, "--in", "-", "--endpoint", srv.URL)
		if code != ExitOK || !strings.Contains(out, "exported 3 spans (2 calls, 1 rollout spans) of 1 rollouts; 0 failed") {
			t.Errorf("exit %d, out %q, err %q", code, out, errOut)
		}
	})
	t.Run("--in damaged lines are skipped, reported and counted", func(t *testing.T) {
		in := filepath.Join(t.TempDir(), "rollouts.jsonl")
		records := `{"_ng_rollout_id":"r1"}` + "\n" + `not json` + "\n\n" + `{"_ng_rollout_id":"bad id"}` + "\n" + `{"_ng_rollout_id":"r2","reward":1}` + "\n"
		capturetest.WriteFile(t, in, []byte(records), 0o644)
		for _, tc := range []struct{ name, stdin, in, file string }{
			{"file", "", in, in},
			{"stdin", records, "-", "stdin"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv, _ := otlpReceiver(t, http.StatusOK)
				out, errOut, code := runCLI(t, tc.stdin, "export", "otlp", "--capture-dir", dir, "--in", tc.in, "--endpoint", srv.URL)
				if code != ExitFailure {
					t.Errorf("exit %d, want %d (lines reported); stderr %q", code, ExitFailure, errOut)
				}
				if want := "exported 6 spans (4 calls, 2 rollout spans) of 2 rollouts; 0 failed; 2 --in lines skipped\n"; out != want {
					t.Errorf("stdout %q, want %q", out, want)
				}
				for _, want := range []string{
					"modelcalls export: " + tc.file + ":2: not exported: ",
					"modelcalls export: " + tc.file + ":4: not exported: ",
				} {
					if !strings.Contains(errOut, want) {
						t.Errorf("stderr %q lacks %q", errOut, want)
					}
				}
				if strings.Contains(errOut, ":3:") || strings.Contains(errOut, "modelcalls: ") {
					t.Errorf("stderr %q: the blank line is not reported, and there is no fatal error", errOut)
				}
			})
		}
	})
	t.Run("--otlp-protocol is --protocol", func(t *testing.T) {
		srv, traces := otlpReceiver(t, http.StatusOK)
		out, errOut, code := runCLI(t, "", "export", "otlp", "--capture-dir", dir, "--endpoint", srv.URL, "--otlp-protocol", "http/protobuf")
		if code != ExitOK || !strings.Contains(out, "exported 4 spans") || traces.Load() == 0 {
			t.Errorf("exit %d, out %q, err %q", code, out, errOut)
		}
	})
	t.Run("traces-only endpoint", func(t *testing.T) {
		// As Jaeger, Langfuse and Phoenix: traces accepted, /v1/metrics answered 404.
		var metrics atomic.Int64
		srv := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/v1/metrics" {
				metrics.Add(1)
				http.NotFound(w, r)
			}
		})
		out, errOut, code := runCLI(t, "", "export", "otlp", "--capture-dir", dir, "--endpoint", srv.URL)
		if code != ExitOK || !strings.Contains(out, "exported 4 spans") || !strings.Contains(errOut, "warning: the OTLP endpoint does not accept metrics") ||
			!strings.Contains(errOut, "404") {
			t.Errorf("exit %d, out %q, err %q; want 0 and one warning", code, out, errOut)
		}
		if metrics.Load() != 1 {
			t.Errorf("%d metric uploads, want 1 (none after the refusal)", metrics.Load())
		}
	})
	t.Run("OTEL_SDK_DISABLED", func(t *testing.T) {
		srv, traces := otlpReceiver(t, http.StatusOK)
		t.Setenv("OTEL_SDK_DISABLED", "true")
		_, errOut, code := runCLI(t, "", "export", "otlp", "--capture-dir", dir, "--endpoint", srv.URL)
		if code != ExitOK || !strings.Contains(errOut, "nothing exported: OTEL_SDK_DISABLED=true") || traces.Load() != 0 {
			t.Errorf("exit %d, err %q, %d trace requests", code, errOut, traces.Load())
		}
	})
	t.Run("OTEL_METRICS_EXPORTER=none", func(t *testing.T) {
		var metrics atomic.Int64
		srv := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/v1/metrics" {
				metrics.Add(1)
			}
		})
		t.Setenv("OTEL_METRICS_EXPORTER", "none")
		out, errOut, code := runCLI(t, "", "export", "otlp", "--capture-dir", dir, "--endpoint", srv.URL)
		if code != ExitOK || !strings.Contains(out, "exported 4 spans") || metrics.Load() != 0 {
			t.Errorf("exit %d, out %q, err %q, %d metric uploads; want 0", code, out, errOut, metrics.Load())
		}
		t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
		if _, errOut, code := runCLI(t, "", "export", "otlp", "--capture-dir", dir, "--endpoint", srv.URL); code != ExitUsage ||
			!strings.Contains(errOut, "OTEL_METRICS_EXPORTER=prometheus: want otlp or none") {
			t.Errorf("exit %d, err %q", code, errOut)
		}
	})
	t.Run("refused", func(t *testing.T) {
		srv, _ := otlpReceiver(t, http.StatusBadRequest)
		out, errOut, code := runCLI(t, "", "export", "otlp", "--capture-dir", dir, "--endpoint", srv.URL)
		if code != ExitFailure || !strings.Contains(out, "exported 0 spans") || !strings.Contains(errOut, "took 0 of 4 spans") {
			t.Errorf("exit %d, out %q, err %q", code, out, errOut)
		}
	})
	t.Run("usage", func(t *testing.T) {
		checkExits(t, []exitCase{
			{"no endpoint", []string{"export", "otlp", "--capture-dir", dir}, ExitUsage, "no endpoint"},
			{"no capture dir", []string{"export", "otlp", "--endpoint", "http://127.0.0.1:1"}, ExitUsage, "--capture-dir is required"},
			{"endpoint not a URL", []string{"export", "otlp", "--capture-dir", dir, "--endpoint", "127.0.0.1:4318"}, ExitUsage, "absolute http://"},
			{"bad protocol", []string{"export", "otlp", "--capture-dir", dir, "--endpoint", "http://127.0.0.1:1", "--protocol", "http/json"}, ExitUsage, "want http/protobuf or grpc"},
			{"missing capture dir", []string{"export", "otlp", "--capture-dir", dir + "/missing", "--endpoint", "http://127.0.0.1:1"}, ExitNotFound, ""},
			{"unknown export subcommand", []string{"export", "bogus"}, ExitUsage, `unknown subcommand "bogus" (known: otlp, samples, tokens)`},
			{"unknown export subcommand with otlp's flags", []string{"export", "otlpp", "--capture-dir", dir}, ExitUsage, `unknown subcommand "otlpp" (known: otlp, samples, tokens); did you mean "otlp"?`},
			{"flags without a subcommand", []string{"export", "--capture-dir", dir}, ExitUsage, "export: missing subcommand before --capture-dir (known: otlp, samples, tokens)"},
			{"bad protocol, proxy's spelling", []string{"export", "otlp", "--capture-dir", dir, "--endpoint", "http://127.0.0.1:1", "--otlp-protocol", "http/json"}, ExitUsage, "want http/protobuf or grpc"},
			// The proxy takes export's spelling too: accepted as --otlp-protocol (which needs an endpoint).
			{"proxy --protocol is --otlp-protocol", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--capture-dir", dir, "--protocol", "grpc"}, ExitUsage, "need --otlp-endpoint"},
			{"otlp content without endpoint", []string{"proxy", "--upstream", "http://127.0.0.1:1", "--capture-dir", dir, "--otlp-content"}, ExitUsage, "need --otlp-endpoint"},
		})
	})
	t.Run("failure names the spans' cause", func(t *testing.T) {
		closed := capturetest.ClosedAddr(t)
		// Traces taken, metrics refused: only then is the metrics upload the error.
		metricsOnly := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if r.URL.Path != "/v1/traces" {
				w.WriteHeader(http.StatusBadRequest)
			}
		})
		// Not an OTLP receiver: 501 with an HTML page, as Python's http.server answers a POST.
		page := "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n<title>Error response</title>\n</head>\n<body>\n<h1>Error response</h1>\n" +
			"<p>Error code: 501</p>\n<p>Message: Unsupported method ('POST').</p>\n" + strings.Repeat("<p>padding</p>\n", 50) + "</body>\n</html>\n"
		htmlServer := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/html;charset=utf-8")
			w.WriteHeader(http.StatusNotImplemented)
			io.WriteString(w, page)
		})
		for _, tc := range []struct {
			name     string
			args     []string
			out      string
			errHas   []string
			errHasnt []string
		}{
			{"http closed port", []string{"--endpoint", "http://" + closed},
				"0 spans (4 calls, 0 rollout spans) of 2 rollouts; 4 failed",
				[]string{"refused the connection", "took 0 of 4 spans", "traces export", "/v1/traces"}, []string{"failed to upload metrics"}},
			// Fails as fast as HTTP does: before any span, not after the gRPC exporter's 10 s of retries.
			{"grpc closed port", []string{"--endpoint", "http://" + closed, "--protocol", "grpc"},
				"",
				[]string{"the OTLP endpoint " + closed + " refused the connection", "nothing was exported", "connection refused"}, []string{"failed to upload metrics"}},
			{"not an OTLP server", []string{"--endpoint", htmlServer.URL},
				"0 spans (4 calls, 0 rollout spans) of 2 rollouts; 4 failed",
				[]string{"took 0 of 4 spans (it does not accept metrics either)", "501 Not Implemented", "(body: Error response Error response Error code: 501 Message: Unsupported method ('POST'). padding"},
				[]string{"<", "\n"}},
			{"metrics alone refused", []string{"--endpoint", metricsOnly.URL},
				"4 spans (4 calls, 0 rollout spans) of 2 rollouts; 0 failed",
				[]string{"all 4 spans exported, but the metrics upload failed"}, []string{"refused the connection"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				start := time.Now()
				out, errOut, code := runCLI(t, "", append([]string{"export", "otlp", "--capture-dir", dir}, tc.args...)...)
				took := time.Since(start)
				if code != ExitFailure || (tc.out == "") != (out == "") || !strings.Contains(out, tc.out) {
					t.Errorf("exit %d, out %q; want exit 1 and %q", code, out, tc.out)
				}
				// Within the 5 s dial timeout (the gRPC exporter alone retries for 10 s).
				if took > 5*time.Second {
					t.Errorf("took %v to fail", took)
				}
				// One error line, prefixed, and nothing else (no log lines of the exporter or the SDK).
				errLines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
				if len(errLines) != 1 || !strings.HasPrefix(errLines[0], "modelcalls: ") {
					t.Fatalf("stderr lines %q, want one starting with modelcalls:", errLines)
				}
				if len(errLines[0]) > 400 {
					t.Errorf("error line of %d bytes: %q", len(errLines[0]), errLines[0])
				}
				for _, s := range tc.errHas {
					if !strings.Contains(errLines[0], s) {
						t.Errorf("error %q does not contain %q", errLines[0], s)
					}
				}
				for _, s := range tc.errHasnt {
					if strings.Contains(errLines[0], s) {
						t.Errorf("error %q contains %q", errLines[0], s)
					}
				}
			})
		}
	})
}
