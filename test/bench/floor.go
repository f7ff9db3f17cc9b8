package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// sBareSync is the floor of any capture proxy that makes an exchange durable before the client
// reads its end: the bare ReverseProxy plus one durable append per call and nothing else.
const sBareSync = "bare ReverseProxy + durable append"

// durableProxy is the bare proxy (bareProxy's ReverseProxy, the same transport) that, for every
// call, keeps the request body as it is forwarded, reads the upstream's response body whole,
// appends request and response as one line to the rollout's file (opened once with O_APPEND and
// O_DSYNC, so the one write returns when the line is on the disk, the same synchronous write the
// capture store issues) and only then sends the body to the client. It does no JSON work, takes no
// claim and no lock but a mutex per file: what it costs above the bare proxy is the least a durable
// capture can cost on this machine, the floor rows 1 and 2 are read against.
type durableProxy struct {
	rp  *httputil.ReverseProxy
	dir string

	mu    sync.Mutex
	files map[string]*durableFile // by rollout id
}

type durableFile struct {
	mu sync.Mutex
	f  *os.File
}

type durableCall struct {
	id  string
	req []byte
}

type durableKey struct{}

// newDurableProxy serves target like bareProxy, appending each call's line below dir.
func newDurableProxy(target, dir string) (*durableProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("durable proxy target: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("durable proxy dir: %w", err)
	}
	p := &durableProxy{dir: dir, files: map[string]*durableFile{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		Transport:      upstreamTransport(),
		ModifyResponse: p.persist,
	}
	return p, nil
}

func (p *durableProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.NewResponseController(w).EnableFullDuplex()
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/ng-rollout/"), "/")
	req, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(req))
	r.ContentLength = int64(len(req))
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), durableKey{}, &durableCall{id: id, req: req})))
}

// persist reads the response body whole, appends the call's line durably, and hands the client
// the body from memory.
func (p *durableProxy) persist(resp *http.Response) error {
	c, _ := resp.Request.Context().Value(durableKey{}).(*durableCall)
	if c == nil {
		return fmt.Errorf("durable proxy: no call in the request context: %w", errUnexpected)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("durable proxy: read response: %w", err)
	}
	line := make([]byte, 0, len(c.req)+len(body)+2)
	line = append(append(append(append(line, c.req...), ' '), body...), '\n')
	f, err := p.file(c.id)
	if err != nil {
		return err
	}
	f.mu.Lock()
	_, err = f.f.Write(line)
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("durable proxy: append: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

func (p *durableProxy) file(id string) (*durableFile, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.files[id]; f != nil {
		return f, nil
	}
	f, err := os.OpenFile(filepath.Join(p.dir, id+".lines"), os.O_WRONLY|os.O_CREATE|os.O_APPEND|oDsync, 0o640)
	if err != nil {
		return nil, fmt.Errorf("durable proxy: %w", err)
	}
	df := &durableFile{f: f}
	p.files[id] = df
	return df, nil
}

// close closes the rollout files.
func (p *durableProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.files {
		f.f.Close()
	}
}
