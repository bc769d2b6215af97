//! The web console. For now its home page, which points to the APIs; the console's pages
//! (login, applications, policies, audit) build on the same `admin` operations.

use actix_web::web;
use askama::Template;
use askama_web::WebTemplate;

#[derive(Template, WebTemplate)]
#[template(path = "home.html")]
struct Home {
    version: &'static str,
}

async fn home() -> Home {
    Home {
        version: env!("CARGO_PKG_VERSION"),
    }
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(home))
        .service(actix_web::web::resource("/static/style.css").to(style));
}

async fn style() -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .body(include_str!("../../static/style.css"))
}
