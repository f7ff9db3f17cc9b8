package gateway_test

import (
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind (a decoder goroutine of a
// compressed body, a timer, a stuck proxy copy), after closing the clients' idle connections.
func TestMain(m *testing.M) {
	code := m.Run()
	rawTransport.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goroutine leak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
