out = sys.argv[1]
rng = np.random.default_rng(4)
for split, n in [('train', 12), ('val', 4)]:
    os.makedirs(f'{out}/{split}/images'); os.makedirs(f'{out}/{split}/gt')
    for i in range(n):
        img = rng.normal(70, 10, (32, 32, 3)).clip(0, 255)
        gt = np.zeros((32, 32), np.uint8)
        for _ in range(2):
            y, x, h, w = rng.integers(0, 24), rng.integers(0, 24), rng.integers(4, 9), rng.integers(4, 9)
            gt[y:y + h, x:x + w] = 255
        img[gt == 255] = [200, 180, 160]
        write_tiff(f'{out}/{split}/images/tile{i}.tif', img.astype(np.uint8), rows_per_strip=8)
        write_tiff(f'{out}/{split}/gt/tile{i}.tif', gt, rows_per_strip=8)
