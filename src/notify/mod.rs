//! Telling a team what its limits do, off the acquire path. The watcher (`watcher`) turns
//! the counts every instance flushes into episodes kept once in Redis, and writes an event
//! for each webhook that listens (`policy.changed` is written with its audit record
//! instead); the sender (`sender`) delivers the stored events, signed by the Standard
//! Webhooks specification (`signature`), rendered as JSON or for Slack (`payload`), only
//! to receivers the operator allows (`receiver`), with retries.

pub mod payload;
pub mod receiver;
pub mod sender;
pub mod signature;
pub mod watcher;
