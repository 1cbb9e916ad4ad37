//! QR codes of short URLs, as PNG or SVG.

use qrcode::{EcLevel, QrCode};

/// Smallest rendered size in pixels: large enough to scan from a screen.
const MIN_PIXELS: u32 = 256;

fn code(text: &str) -> Result<QrCode, String> {
    // Medium error correction: survives smudges on print, keeps codes small.
    QrCode::with_error_correction_level(text.as_bytes(), EcLevel::M).map_err(|e| e.to_string())
}

/// A PNG (8-bit grayscale) of `text` as a QR code.
pub fn png(text: &str) -> Result<Vec<u8>, String> {
    use image::ImageEncoder;
    let img = code(text)?
        .render::<image::Luma<u8>>()
        .min_dimensions(MIN_PIXELS, MIN_PIXELS)
        .build();
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::L8,
        )
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// An SVG document of `text` as a QR code.
pub fn svg(text: &str) -> Result<String, String> {
    Ok(code(text)?
        .render::<qrcode::render::svg::Color>()
        .min_dimensions(MIN_PIXELS, MIN_PIXELS)
        .build())
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_both_formats() {
        let png = super::png("https://s.example/Ab3dE9x").unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let svg = super::svg("https://s.example/Ab3dE9x").unwrap();
        assert!(svg.contains("<svg"), "{svg}");
    }
}
