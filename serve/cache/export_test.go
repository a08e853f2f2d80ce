package cache

import (
	"context"
	"time"
)

// RelistFresh forgets every entry and lists the prefix again, so that
// every value is decoded anew (a cold start).
func (c *Cache) RelistFresh(ctx context.Context) error {
	c.mu.Lock()
	c.kv = map[string]*entry{}
	c.mu.Unlock()
	_, err := c.list(ctx)
	return err
}

// Relist asks the cache to list again, as a read that found etcd's
// revision gone back does.
func (c *Cache) Relist() { c.relist() }

// NewListed is New without decoding, running listed between each list and
// the watch that follows it.
func NewListed(under Underlying, prefix string, wait time.Duration, listed func(*Cache)) (*Cache, error) {
	return newCache(under, prefix, wait, nil, listed)
}
