//! An actix-web middleware (`middleware::from_fn`) taking a permit of
//! `RATEKEEPER_RESOURCE` (default `orders.create`) per request, keyed by the `x-user`
//! header: a denied request is answered 429 with Retry-After and the RateLimit headers and
//! never reaches the handler; a granted one gets the RateLimit headers.
//!
//! ```sh
//! RATEKEEPER_API_KEY=rk_live_... cargo run -p ratekeeper-client --example actix
//! curl -i -H 'x-user: alice' http://127.0.0.1:3000/
//! ```

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, Error, HttpResponse, HttpServer, get, web};
use ratekeeper_client::{AcquireOptions, Client, RateLimitHeaders};

/// What the middleware needs: the client and the resource.
struct Limiter {
    client: Client,
    resource: String,
}

fn with_headers(response: &mut HttpResponse<BoxBody>, headers: &RateLimitHeaders, denied: bool) {
    for (name, value) in headers.iter() {
        if name == "Retry-After" && !denied {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.to_ascii_lowercase()),
            HeaderValue::try_from(value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
}

async fn rate_limit(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let limiter = request
        .app_data::<web::Data<Limiter>>()
        .expect("the Limiter is app data")
        .clone();
    let key = request
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut options = AcquireOptions::new();
    options.key = key;
    let decision = match limiter.client.acquire(&limiter.resource, options).await {
        Ok(decision) => decision,
        Err(error) => {
            let response = HttpResponse::InternalServerError().body(error.to_string());
            return Ok(request.into_response(response));
        }
    };
    if !decision.allowed {
        let mut headers = decision.headers.clone();
        if headers.retry_after.is_none() {
            let ms = decision.retry_after_ms.unwrap_or(1000).max(1) as u64;
            headers.retry_after = Some(ms.div_ceil(1000).to_string());
        }
        let mut response = HttpResponse::TooManyRequests().body("too many requests\n");
        with_headers(&mut response, &headers, true);
        return Ok(request.into_response(response));
    }
    let response = next.call(request).await?.map_into_boxed_body();
    let (request, mut response) = response.into_parts();
    with_headers(&mut response, &decision.headers, false);
    Ok(ServiceResponse::new(request, response))
}

#[get("/")]
async fn hello() -> &'static str {
    "hello\n"
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let url = std::env::var("RATEKEEPER_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let api_key = std::env::var("RATEKEEPER_API_KEY").expect("RATEKEEPER_API_KEY");
    let resource = std::env::var("RATEKEEPER_RESOURCE").unwrap_or_else(|_| "orders.create".into());
    let client = Client::builder(url, api_key)
        .build()
        .map_err(std::io::Error::other)?;
    let limiter = web::Data::new(Limiter { client, resource });
    println!("listening on http://127.0.0.1:3000");
    HttpServer::new(move || {
        App::new()
            .app_data(limiter.clone())
            .wrap(from_fn(rate_limit))
            .service(hello)
    })
    .bind(("127.0.0.1", 3000))?
    .run()
    .await
}
