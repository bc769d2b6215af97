use rand::Rng;

/// A new random row id: 16 hex characters (64 bits), made here so that inserts need no
/// backend-specific way of reading a generated key back.
pub fn new_id() -> String {
    let bytes: [u8; 8] = rand::rng().random();
    hex::encode(bytes)
}

/// Now, in Unix milliseconds: how every time is stored.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
