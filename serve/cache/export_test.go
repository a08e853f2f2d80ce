package cache

import "context"

// RelistFresh forgets every entry and lists the prefix again, so that
// every value is decoded anew (a cold start).
func (c *Cache) RelistFresh(ctx context.Context) error {
	c.mu.Lock()
	c.kv = map[string]*entry{}
	c.mu.Unlock()
	_, err := c.list(ctx)
	return err
}
