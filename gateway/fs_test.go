package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
)

func readDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func compactJSON(dst *bytes.Buffer, src []byte) error { return json.Compact(dst, src) }
