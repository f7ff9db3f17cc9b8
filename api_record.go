package modelcalls

import (
	"encoding/json"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// The record model lives in package record; these aliases keep the seed-shaped API of this package
// (modelcalls.ModelCallRecord, modelcalls.BuildRecord, ...) working for callers that import only
// the root.
type (
	ModelCallRecord = record.ModelCallRecord
	ToolCall        = record.ToolCall
	RawText         = record.RawText
	TokenStats      = record.TokenStats
)

// ErrInvalidExchange is record.ErrInvalidExchange: the errors.Is target of every error BuildRecord
// returns for a damaged capture line.
var ErrInvalidExchange = record.ErrInvalidExchange

// BuildRecord builds the record of one capture line (record.BuildRecord has the rules).
func BuildRecord(exchange []byte, callIndex int) (*ModelCallRecord, error) {
	return record.BuildRecord(exchange, callIndex)
}

// ExtractTokenStats normalizes a provider usage object (record.ExtractTokenStats has the rules).
func ExtractTokenStats(usage json.RawMessage) TokenStats { return record.ExtractTokenStats(usage) }

// ReadRecords is the strict read of rollout id's records (record.ReadRecords).
func ReadRecords(store *capture.Store, id string) ([]ModelCallRecord, error) {
	return record.ReadRecords(store, id)
}

// ReadAvailableRecords is the tolerant read of rollout id's records and the count of damaged lines
// (record.ReadAvailableRecords).
func ReadAvailableRecords(store *capture.Store, id string) (records []ModelCallRecord, damaged int, err error) {
	return record.ReadAvailableRecords(store, id)
}
