package samples

import (
	"os"
	"testing"

	"github.com/modelcalls/modelcalls/lineage/lineagetest"
)

func TestMain(m *testing.M) {
	lineagetest.UseViewParser()
	os.Exit(m.Run())
}
