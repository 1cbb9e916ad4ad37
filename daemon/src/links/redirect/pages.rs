//! The HTML the redirect listener answers with: the app page (try the app,
//! fall back to the website), the 404 page and error pages, and the escaping
//! that keeps a stored URL from breaking out of them.

use super::NO_STORE;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

pub(super) fn app_page(app: &str, fallback: &str) -> Response {
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>Opening the app…</title>\
         <script>window.location.replace({app_js});\
         setTimeout(function(){{window.location.replace({fallback_js});}},1500);</script>\
         </head><body><p><a href=\"{app_html}\">Open in the app</a> · \
         <a href=\"{fallback_html}\">Continue to the website</a></p></body></html>\n",
        app_js = js_string(app),
        fallback_js = js_string(fallback),
        app_html = html_escape(app),
        fallback_html = html_escape(fallback),
    );
    page(StatusCode::OK, body)
}

pub(super) fn page(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static(NO_STORE)),
        ],
        body,
    )
        .into_response()
}

pub(super) fn not_found() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Link not found</title></head>\
         <body><h1>Link not found</h1><p>This short link does not exist or has expired.</p>\
         </body></html>\n"
            .to_string(),
    )
}

pub(super) fn error_page(status: StatusCode, what: &str) -> Response {
    page(
        status,
        format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{s}</title></head>\
             <body><h1>{s}</h1><p>{w}</p></body></html>\n",
            s = status,
            w = html_escape(what)
        ),
    )
}

pub(super) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A JavaScript string literal that can't end the string or the script element.
pub(super) fn js_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' | '<' | '>' | '&' | '\'' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
