// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package ratelog bounds log lines that a sender can trigger at will (a misconfigured or
// compromised agent sends every probe interval): at most a burst, then one per interval,
// each saying how many lines were suppressed since the previous one.
package ratelog

import (
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"
)

// Logger writes at most burst lines, then one per every. Safe for concurrent use.
type Logger struct {
	logger     *zap.Logger
	mu         sync.Mutex
	rl         *rate.Limiter
	suppressed int
}

// New returns a Logger.
func New(logger *zap.Logger, every time.Duration, burst int) *Logger {
	return &Logger{logger: logger, rl: rate.NewLimiter(rate.Every(every), burst)}
}

// SetEvery changes the interval between lines (0: no limit); lines suppressed so far are
// still reported with the next one.
func (l *Logger) SetEvery(every time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rl.SetLimit(rate.Every(every))
	if every == 0 {
		l.rl.SetLimit(rate.Inf)
	}
}

// Allow reports whether a line may be written now and, if so, how many were suppressed
// since the previous one (for callers that build their own line).
func (l *Logger) Allow() (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.rl.Allow() {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.suppressed = 0
	return n, true
}

// Log writes msg at level unless the rate is exceeded, with suppressed_since_last when
// lines were suppressed.
func (l *Logger) Log(level zapcore.Level, msg string, fields ...zap.Field) {
	n, ok := l.Allow()
	if !ok {
		return
	}
	if n > 0 {
		fields = append(fields, zap.Int("suppressed_since_last", n))
	}
	if ce := l.logger.Check(level, msg); ce != nil {
		ce.Write(fields...)
	}
}
