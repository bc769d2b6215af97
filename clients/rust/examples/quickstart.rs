use ratekeeper_client::{AcquireOptions, Client};

#[tokio::main]
async fn main() -> Result<(), ratekeeper_client::Error> {
    let url = std::env::var("RATEKEEPER_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let api_key = std::env::var("RATEKEEPER_API_KEY").expect("RATEKEEPER_API_KEY");
    let client = Client::builder(url, api_key).build()?;

    let decision = client
        .acquire("orders.create", AcquireOptions::new())
        .await?;
    println!(
        "allowed={} remaining={:?} retry_after_ms={:?}",
        decision.allowed, decision.remaining, decision.retry_after_ms
    );
    Ok(())
}
