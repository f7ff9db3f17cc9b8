// Command scripted-upstream runs the e2e tests' scripted model server on its own, to try a
// harness against it by hand:
//
//	go run ./test/e2e/cmd/scripted-upstream -file /abs/path/hello.txt -listen 127.0.0.1:0
//
// It prints "listening on http://ADDR" and then one JSON line per model call it answers.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcalls/modelcalls/test/e2e"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (loopback)")
	file := flag.String("file", "", "absolute path of the file the scripted tool call reads (required)")
	noReasoning := flag.Bool("no-reasoning", false, "send no reasoning with tool calls")
	flag.Parse()
	if *file == "" {
		fmt.Fprintln(os.Stderr, "scripted-upstream: -file is required")
		os.Exit(2)
	}
	s := &e2e.Scripted{FilePath: *file, NoReasoning: *noReasoning}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("scripted-upstream: listen: %v", err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			for _, sv := range s.Take() {
				b, _ := json.Marshal(sv)
				fmt.Println(string(b))
			}
		}
	}()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}
