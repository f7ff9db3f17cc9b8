package samples

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// ParquetWriter writes rows of one type (TokenRow or Transition) as a Parquet file: one row group
// per Write, zstd-compressed, id and log probability lists as LIST columns (so DuckDB, pyarrow and
// Hugging Face datasets read them as lists). Close writes the footer; the file is unreadable
// without it.
type ParquetWriter[T any] struct {
	w *parquet.GenericWriter[T]
}

// NewParquetWriter starts a Parquet file on w.
func NewParquetWriter[T any](w io.Writer) *ParquetWriter[T] {
	return &ParquetWriter[T]{w: parquet.NewGenericWriter[T](w, parquet.Compression(&zstd.Codec{}))}
}

// Write appends rows.
func (p *ParquetWriter[T]) Write(rows []T) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := p.w.Write(rows); err != nil {
		return fmt.Errorf("write parquet rows: %w", err)
	}
	return nil
}

// Close flushes the rows and writes the footer.
func (p *ParquetWriter[T]) Close() error {
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("close parquet file: %w", err)
	}
	return nil
}
