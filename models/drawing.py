"""Evaluation pictures drawn with NumPy: tiles with captions, a confusion-matrix heat map.

No plotting library: captions use a 3x5 pixel font, drawn at `zoom` times its size.
Every function returns uint8 RGB [height, width, 3].
"""
import numpy as np

GLYPHS = {  # 3 columns x 5 rows; '#' is ink
    '0': ('###', '#.#', '#.#', '#.#', '###'), '1': ('.#.', '##.', '.#.', '.#.', '###'),
    '2': ('###', '..#', '###', '#..', '###'), '3': ('###', '..#', '.##', '..#', '###'),
    '4': ('#.#', '#.#', '###', '..#', '..#'), '5': ('###', '#..', '###', '..#', '###'),
    '6': ('###', '#..', '###', '#.#', '###'), '7': ('###', '..#', '.#.', '.#.', '.#.'),
    '8': ('###', '#.#', '###', '#.#', '###'), '9': ('###', '#.#', '###', '..#', '###'),
    '.': ('...', '...', '...', '...', '.#.'), '%': ('#.#', '..#', '.#.', '#..', '#.#'),
    '>': ('#..', '.#.', '..#', '.#.', '#..'), ' ': ('...',) * 5,
    'A': ('.#.', '#.#', '###', '#.#', '#.#'), 'C': ('.##', '#..', '#..', '#..', '.##'),
    'R': ('##.', '#.#', '##.', '#.#', '#.#'), 'U': ('#.#', '#.#', '#.#', '#.#', '###'),
    'D': ('##.', '#.#', '#.#', '#.#', '##.'),
    'E': ('###', '#..', '##.', '#..', '###'), 'F': ('###', '#..', '##.', '#..', '#..'),
    'I': ('###', '.#.', '.#.', '.#.', '###'), 'M': ('#.#', '###', '###', '#.#', '#.#'),
    'P': ('##.', '#.#', '##.', '#..', '#..'), 'S': ('.##', '#..', '.#.', '..#', '##.'),
    'T': ('###', '.#.', '.#.', '.#.', '.#.'),
}
GLYPH_HEIGHT, GLYPH_WIDTH = 5, 3
WHITE, BLACK = (255, 255, 255), (0, 0, 0)
GREEN, RED, GREY = (60, 200, 90), (235, 70, 60), (40, 40, 40)


def text_width(text: str, zoom: int) -> int:
    return len(text) * (GLYPH_WIDTH + 1) * zoom - zoom


def draw_text(canvas: np.ndarray, text: str, top: int, left: int, color, zoom: int = 2) -> None:
    """Writes text into canvas in place; characters outside GLYPHS raise KeyError."""
    for i, char in enumerate(text):
        ink = np.array([[c == '#' for c in row] for row in GLYPHS[char]])
        ink = ink.repeat(zoom, axis=0).repeat(zoom, axis=1)
        x = left + i * (GLYPH_WIDTH + 1) * zoom
        region = canvas[top:top + ink.shape[0], x:x + ink.shape[1]]
        region[ink[:region.shape[0], :region.shape[1]]] = color


def to_rgb(image: np.ndarray, zoom: int) -> np.ndarray:
    """float [H, W, C] of any range -> uint8 RGB, stretched to full contrast, zoomed."""
    image = np.asarray(image, np.float32)
    low, high = float(image.min()), float(image.max())
    scaled = (image - low) / (high - low) if high > low else np.zeros_like(image)
    rgb = np.broadcast_to(scaled, image.shape[:2] + (3,)) if image.shape[2] == 1 else scaled[..., :3]
    return (rgb * 255).round().astype(np.uint8).repeat(zoom, axis=0).repeat(zoom, axis=1)


def captioned_tile(image: np.ndarray, lines, zoom: int = 2, border=None) -> np.ndarray:
    """The image zoomed, a 2-pixel border (if a color is given), then caption lines [(text, color)]."""
    picture = to_rgb(image, zoom)
    line_height = (GLYPH_HEIGHT + 2) * 2
    width = picture.shape[1] + 4
    tile = np.full((picture.shape[0] + 4 + line_height * len(lines) + 2, width, 3), GREY, np.uint8)
    tile[:picture.shape[0] + 4] = border or GREY
    tile[2:2 + picture.shape[0], 2:2 + picture.shape[1]] = picture
    for row, (text, color) in enumerate(lines):
        draw_text(tile, text, picture.shape[0] + 6 + row * line_height,
                  max(1, (width - text_width(text, 2)) // 2), color, zoom=2)
    return tile


def grid(tiles, columns: int, gap: int = 4) -> np.ndarray:
    """Tiles of one size in rows of `columns`; an empty list gives a small blank picture."""
    if not tiles:
        return np.full((16, 16, 3), GREY, np.uint8)
    height, width, _ = tiles[0].shape
    columns = min(columns, len(tiles))
    rows = -(-len(tiles) // columns)
    canvas = np.full((rows * (height + gap) + gap, columns * (width + gap) + gap, 3), BLACK, np.uint8)
    for i, tile in enumerate(tiles):
        top, left = gap + (i // columns) * (height + gap), gap + (i % columns) * (width + gap)
        canvas[top:top + height, left:left + width] = tile
    return canvas


def mistake_grid(images, true_labels, predicted_labels, confidences, columns: int = 6) -> np.ndarray:
    """One tile per mistake: the image, then 'T3>P8' (true 3, predicted 8) and the confidence."""
    tiles = [captioned_tile(image, [(f'T{true}>P{predicted}', WHITE),
                                    (f'{100 * confidence:.0f}%', RED)])
             for image, true, predicted, confidence
             in zip(images, true_labels, predicted_labels, confidences)]
    return grid(tiles, columns)


def pair_strip(images_a, images_b, labels, scores) -> np.ndarray:
    """One column per pair: photo a over photo b, 'SAME' or 'DIFF' (the truth), and the model's
    same-person probability, in red when it is on the wrong side of 0.5."""
    tiles = []
    for image_a, image_b, label, score in zip(images_a, images_b, labels, scores):
        stacked = np.concatenate([image_a, np.full_like(image_a[:2], image_a.max()), image_b])
        wrong = (score > 0.5) != bool(label)
        tiles.append(captioned_tile(stacked, [('SAME' if label else 'DIFF', WHITE),
                                              (f'{score:.2f}', RED if wrong else GREEN)], zoom=1))
    return grid(tiles, columns=len(tiles))


def confusion_image(matrix: np.ndarray, cell: int = 28) -> np.ndarray:
    """Rows are true classes, columns predicted; a cell's blue is its share of the row, with the count."""
    matrix = np.asarray(matrix, np.int64)
    classes = matrix.shape[0]
    margin = 36  # room for the headers and class numbers
    size = margin + classes * cell + 1
    canvas = np.full((size, max(size, margin + text_width('PREDICTED', 2) + 4), 3), WHITE, np.uint8)
    draw_text(canvas, 'PREDICTED', 2, margin + max(0, (classes * cell - text_width('PREDICTED', 2)) // 2),
              GREEN)
    draw_text(canvas, 'TRUE', margin - 12, 2, RED)
    shares = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    for i in range(classes):
        label = str(i)
        draw_text(canvas, label, margin + i * cell + (cell - 10) // 2,
                  margin - 4 - text_width(label, 2), RED)
        draw_text(canvas, label, margin - 12,
                  margin + i * cell + (cell - text_width(label, 2)) // 2, GREEN)
        for j in range(classes):
            top, left = margin + i * cell, margin + j * cell
            shade = np.array([255, 255, 255]) - shares[i, j] * np.array([215, 150, 0])
            canvas[top:top + cell, left:left + cell] = shade.round().astype(np.uint8)
            canvas[top, left:left + cell] = canvas[top:top + cell, left] = (200, 200, 200)
            count = str(matrix[i, j])
            zoom = 2 if text_width(count, 2) <= cell - 2 else 1
            if text_width(count, zoom) <= cell - 2 and matrix[i, j]:
                draw_text(canvas, count, top + (cell - GLYPH_HEIGHT * zoom) // 2,
                          left + (cell - text_width(count, zoom)) // 2,
                          WHITE if shares[i, j] > 0.5 else BLACK, zoom)
    return canvas
