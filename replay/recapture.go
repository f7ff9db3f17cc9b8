package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/rollout"
)

// Recapture serves a replay through the capture gateway, so that the re-run is captured the way
// the gateway captures any run: clients talk to a gateway.Handler writing to Out, whose upstream
// is the replay Server listening on a loopback port of its own. The replay declares its answers
// with the gateway's provenance headers, so their lines say response_source "local",
// upstream_attempted false and local_response_reason "replay" (misses "replay_miss" or
// "replay_exhausted"); misses forwarded to a real upstream are recorded as relayed from it.
//
// The gateway strips the /ng-rollout/<id> prefix before it forwards; the rollout id travels to
// the replay in the request's context and the transport puts the prefix back.
type Recapture struct {
	gw    *gateway.Handler
	inner *http.Server
	ln    net.Listener
	done  chan struct{}
}

type rolloutKey struct{}

// NewRecapture starts s on 127.0.0.1 (a free port) behind a gateway.Handler capturing into out,
// with modelServerName as model_ref.name ("" for null). Close it with Shutdown.
func NewRecapture(s *Server, out *capture.Store, modelServerName string, log *slog.Logger) (*Recapture, error) {
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("replay re-capture: listen: %w", err)
	}
	rc := &Recapture{ln: ln, done: make(chan struct{})}
	rc.inner = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		defer close(rc.done)
		if err := rc.inner.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("replay re-capture: inner server stopped", "err", err)
		}
	}()
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.DisableCompression = true
	base.MaxIdleConnsPerHost = 256
	rc.gw = &gateway.Handler{
		Upstream:         &url.URL{Scheme: "http", Host: ln.Addr().String()},
		Store:            out,
		ModelServerName:  modelServerName,
		Transport:        prefixTransport{base: base},
		Logger:           log,
		NoAdminEndpoints: true,
		// The gateway in front reads the request first: it keeps the replay's request limits.
		MaxRequestBytes:    s.MaxRequestBytes,
		RequestBodyTimeout: s.RequestBodyTimeout,
	}
	return rc, nil
}

// Gateway returns the capturing gateway (its Registry holds the gateway's metrics).
func (rc *Recapture) Gateway() *gateway.Handler { return rc.gw }

// ServeHTTP hands the request to the gateway, with its rollout id in the context.
func (rc *Recapture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id, _, ok := rollout.SplitPath(r.URL.EscapedPath()); ok {
		r = r.WithContext(context.WithValue(r.Context(), rolloutKey{}, id))
	}
	rc.gw.ServeHTTP(w, r)
}

// Shutdown waits until every capture in flight is written (or ctx ends), then stops the inner
// server.
func (rc *Recapture) Shutdown(ctx context.Context) error {
	err := rc.gw.Shutdown(ctx)
	if serr := rc.inner.Shutdown(ctx); serr != nil {
		rc.inner.Close()
		err = errors.Join(err, serr)
	}
	<-rc.done
	return err
}

// prefixTransport puts the /ng-rollout/<id> prefix the gateway stripped back on the way to the
// inner replay server.
type prefixTransport struct{ base http.RoundTripper }

func (t prefixTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	id, _ := req.Context().Value(rolloutKey{}).(string)
	if id == "" {
		return t.base.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	u := *req.URL
	prefix := rollout.PathPrefix(id)
	u.Path = prefix + req.URL.Path
	if req.URL.RawPath != "" {
		u.RawPath = prefix + req.URL.RawPath
	}
	out.URL = &u
	return t.base.RoundTrip(out)
}
