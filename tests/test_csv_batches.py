"""`prepare csv`'s batches (input_fns/tables/csv_batches.py: Arrow's reader, whole columns typed
and encoded at once) against the rows path they stand in for (csv_files' rows, RowReader,
RowEncoder): the same split keys and record bytes, row for row, and the same one-line errors, on
tables exercising each rule of reading a CSV as it was written."""
import gzip

import numpy as np
import pytest

from common.errors import UserError
from input_fns.records import split as data_split
from input_fns.tables import (batch_work, csv_batches, csv_files, csv_tables, example_batches,
                              table_reading, table_records, table_schema, table_splits)

PROSE = ['the parcel came a day late but the driver was kind', 'fine product, would buy again',
         'the box was open and two items were missing from it', 'great value for the money',
         'it broke after a week of normal use, sadly', 'exactly as the picture shows it']


def lines(rows: int) -> str:
    """A table of every kind of column: ints, floats, categories (one quoted with the delimiter,
    a doubled quote or a newline in it), free text, dates, empty and NA cells."""
    out = ['id,amount,"city, state",note,day,label']
    for row in range(rows):
        city = ['"Paris, TX"', 'Oslo', '"say ""hi"""', '"two\nlines"', 'Rome', ''][row % 6]
        amount = ['1.5', '-2e3', '', 'NA', '.25', '7.'][row % 6]
        out.append(f'{row * 7 - 40},{amount},{city},"{PROSE[row % 6]}",2024-01-{row % 28 + 1:02d},'
                   f'{"yes" if row % 3 else "no"}')
    return '\n'.join(out) + '\n'


TEXT = {'column_types': 'note:text'}  # lines()' note as free text, its words


def write(path, text, encoding='utf-8', compress=False):
    data = text.encode(encoding) if isinstance(text, str) else text
    with (gzip.open(path, 'wb') if compress else open(path, 'wb')) as f:
        f.write(data)
    return str(path)


def table(path, label='label', na_values=None, float_overflow=None, column_types=None,
          **flags):
    csv_format = csv_files.file_format(path, **flags)
    reading = table_reading.TableReading.of_schema(None, na_values, float_overflow)
    return csv_tables.Table([path], label, column_types, None, reading, None, csv_format)


def by_rows(path, **options):
    """The rows path: (split key, record) of each row, and the floats read as inf."""
    rows = table(path, **options)
    encoder = table_records.RowEncoder(rows.names, rows.dtypes)
    records = [(key.encode(), encoder.encode(values)) for key, values in rows.typed_rows()]
    return records, rows._reader.overflowed


def by_batches(path, **options):
    batches = table(path, **options)
    encoder = example_batches.BatchEncoder(batches.names, batches.dtypes)
    records = [pair for batch in batches.typed_batches()
               for pair in zip(batch.keys, encoder.encode(batch.columns))]
    return records, batches._reader.overflowed


def outcome(read, path, **options):
    try:
        return read(path, **options)
    except UserError as error:
        return f'UserError: {error}'


def assert_same(path, **options):
    """Both paths read the file alike (records or the error); returns the rows path's."""
    rows = outcome(by_rows, path, **options)
    assert outcome(by_batches, path, **options) == rows
    return rows


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    """Many batches of a small file (Arrow's block), so a row is found in a later batch."""
    monkeypatch.setattr(csv_batches, 'BLOCK_BYTES', 512)
    monkeypatch.setattr(csv_batches, 'ROW_PATH_BATCH', 7)
    monkeypatch.setattr(csv_tables, 'SAMPLE_ROWS', 20)


def test_plain_columns_are_typed_whole_and_make_the_rows_paths_records(tmp_path, monkeypatch):
    path = write(tmp_path / 'plain.csv', lines(200))
    rows, _ = by_rows(path, **TEXT)
    assert table(path, **TEXT).dtypes == ['int', 'float', 'string', 'text', 'date', 'string']

    def no_rows_path(*_):
        raise AssertionError('the rows path read a batch of plain columns')

    monkeypatch.setattr(table_reading.RowReader, 'typed', no_rows_path)
    batches, _ = by_batches(path, **TEXT)
    assert batches == rows and len(rows) == 200


@pytest.mark.parametrize('name,text,options', [
    ('semicolons, decimal commas', 'a;b;label\n1,5;2;x\n-0,25;;y\n3;4;x\n,5;NA;y\n', {}),
    ('cp1252', 'city;price;label\ncafé;1,5;€\nna\u00efve;2;x\n', {'encoding': 'cp1252'}),
    ('UTF-8 with its mark', '\ufeffname,n,label\nÅsa,1,x\nZoë,2,y\n', {}),
    ('UTF-16', 'name\tn\tlabel\nÅsa\t1\tx\nZoë\t2\ty\n', {'file_encoding': 'utf-16'}),
    ('--na_values', 'a,b,label\n1,-,x\nmissing,2.5,y\n3,4,x\n', {'na_values': ['-', 'missing']}),
    ('spaces around fields', 'a,b,label\n 1 ,x ,y\n2,\u00a0z,y\n 3,w,x\n', {}),
    ('money', 'price,label\n"$1,234.50",x\n$3.25,y\n"$10,000.00",x\n', {}),
    ('percents and grouped thousands', 'p,n,label\n12.5%,"1,234,567",x\n3%,"2,000",y\n', {}),
    ('digits Python reads', 'a,b,label\n+5,1_0.5,x\n1_000,\u0661,y\n007,1E3,x\n', {}),
    ('blank lines and CR line ends', 'a,b,label\r\n\r\n1,2,x\r\n\r\n3,4,y\r\n', {}),
    ('a header only', 'a,b,label\n', {}),
])
def test_each_rule_of_reading_a_file_gives_the_rows_paths_records(tmp_path, name, text, options):
    encoding = options.pop('file_encoding', options.get('encoding', 'utf-8'))
    path = write(tmp_path / 'table.csv', text, encoding)
    rows = assert_same(path, **options)
    assert not isinstance(rows, str), rows


def test_a_gzipped_file_is_read_alike(tmp_path):
    assert_same(write(tmp_path / 'plain.csv.gz', lines(60), compress=True), **TEXT)


@pytest.mark.parametrize('bad,options,fragment', [
    ('12.5', {}, "column 'id': '12.5' is not an int"),
    ('9223372036854775808', {}, "'9223372036854775808' is beyond int64's range"),
    ('-9223372036854775808', {}, 'is beyond int64'),
    ('1 2', {}, "'1 2' is not an int"),
])
def test_a_bad_int_in_a_later_batch_is_the_rows_paths_one_line_error(tmp_path, bad, options,
                                                                     fragment):
    text = lines(150).splitlines()
    text[120] = bad + text[120][text[120].index(','):]
    error = assert_same(write(tmp_path / 'bad.csv', '\n'.join(text) + '\n'), **options, **TEXT)
    assert error.startswith('UserError: ') and fragment in error and 'line 1' in error, error
    assert '\n' not in error


@pytest.mark.parametrize('bad,options', [
    ('1e39', {}), ('inf', {}), ('x', {}), ('1e39', {'float_overflow': 'inf'}),
    ('-1e39', {'float_overflow': 'inf'})])
def test_a_float_beyond_float32_or_not_a_number_reads_as_the_rows_path_reads_it(tmp_path, bad,
                                                                               options):
    text = 'a,b,label\n' + ''.join(f'{row},{row / 4},x\n' for row in range(100))
    text += f'5,{bad},y\n' + ''.join(f'{row},{row / 8},x\n' for row in range(60))
    outcome_ = assert_same(write(tmp_path / 'floats.csv', text), **options)
    if options:
        records, overflowed = outcome_
        assert overflowed == {'b': 1} and len(records) == 161
    else:
        assert 'line 102' in outcome_ and "column 'b'" in outcome_, outcome_


def test_a_row_of_another_width_and_bytes_not_utf8_are_the_rows_paths_errors(tmp_path):
    text = lines(150)
    ragged = write(tmp_path / 'ragged.csv', text.replace('\n-33,', '\n-33,1,', 1))
    error = assert_same(ragged, **TEXT)
    assert 'fields, but the header names 6 columns' in error, error
    data = text.encode()
    broken = write(tmp_path / 'latin.csv', data[:-200] + 'é'.encode('latin-1') + data[-200:])
    error = assert_same(broken, **TEXT)
    assert 'not UTF-8 text' in error and '--encoding=cp1252' in error, error


def test_floats_and_ints_arrow_casts_are_pythons(tmp_path):
    """Arrow's casts round as Python's float() does, and hold every int64."""
    random = np.random.RandomState(0)
    floats = [f'{mantissa}e{exponent}' for mantissa, exponent in zip(
        random.randint(1, 10 ** 17, 3000, dtype=np.int64), random.randint(-62, 20, 3000))]
    ints = [str(value) for value in random.randint(-2 ** 63 + 1, 2 ** 63 - 1, 3000,
                                                  dtype=np.int64)]
    text = 'f,i,label\n' + ''.join(f'{f},{i},x\n' for f, i in zip(floats, ints))
    rows = assert_same(write(tmp_path / 'numbers.csv', text))
    assert len(rows[0]) == 3000, rows


def test_write_batches_takes_the_same_splits_records_and_statistics_as_write_table(tmp_path):
    path = write(tmp_path / 'plain.csv', lines(9000))

    class Writer:
        def __init__(self):
            self.records = []

        @property
        def written(self):
            return len(self.records)

        def write(self, record):
            self.records.append(record)

        def write_many(self, data, lengths, keys):
            ends = np.cumsum(lengths).tolist()
            self.records.extend(data[start:end] for start, end in zip([0] + ends, ends))

    def prepared(batches: bool, workers: int = 0):
        typed = table(path, label='city, state', **TEXT)
        stats = table_schema.TableStats(typed.columns, typed.dtypes, typed.label, typed.task,
                                        1000, 0)
        writers = {'train': Writer(), 'validation': Writer()}
        if batches:
            work = batch_work.BatchWork(
                typed.column_typing(), example_batches.BatchEncoder(typed.names, typed.dtypes),
                typed.label_index, 0.3, None, list(writers), 0, stats.statistics_of)
            with batch_work.worker_pool(workers) as pool:
                skipped = table_splits.write_batches(
                    writers, batch_work.worked_batches(typed, work, pool), stats, typed.label,
                    'the test')
        else:
            encoder = table_records.RowEncoder(typed.names, typed.dtypes)
            rows = ((key.encode(), values, encoder.encode(values))
                    for key, values in typed.typed_rows())
            skipped = table_splits.write_table(writers, rows, stats, typed.label, 0.3, 'the test')
        return ({split: writer.records for split, writer in writers.items()}, skipped,
                stats.schema())

    written, skipped, schema = prepared(batches=True)
    assert prepared(batches=False) == (written, skipped, schema)
    # Worked in worker processes (batch_work): the same, in the same order.
    assert prepared(batches=True, workers=2) == (written, skipped, schema)
    assert skipped['train'] + skipped['validation'] == 1500  # the empty city: no label
    assert 0 < len(written['validation']) < len(written['train'])


def test_the_validation_mask_is_is_validation_of_each_key():
    keys = [f'row {index}'.encode() for index in range(5000)]
    for fraction in (0.0, 0.2, 0.5, 0.999):
        assert data_split.validation_mask(keys, fraction).tolist() == [
            data_split.is_validation(key, fraction) for key in keys]



@pytest.mark.parametrize('ints,floats', [
    (['0x10', '7'], ['1.5', '2']),  # Arrow's int cast reads hex; Python's int() does not
    (['--5', '7'], ['1.5', '2']),
    (['+5', '-0'], ['1_0', '2']),  # float() reads '1_0'; Arrow does not
    (['5', '007'], ['Infinity', '-inf']),
    (['5', '6'], ['nan', '2']),
    (['5', '6'], ['+.5', '5.']),
    (['5', '6'], ['1e-400', '-1.5E+3']),
])
def test_numbers_only_python_reads_or_only_arrow_reads_go_the_rows_paths_way(tmp_path, ints,
                                                                             floats):
    """The fast path's cheap checks (an ASCII digit test, the float cast) take no field that
    the rows path reads otherwise: the same records or the same one-line error."""
    text = 'i,f,label\n' + ''.join(f'{row},{row / 4},x\n' for row in range(60))
    text += ''.join(f'{i},{f},y\n' for i, f in zip(ints, floats))
    assert_same(write(tmp_path / 'numbers.csv', text))
